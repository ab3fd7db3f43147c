"""deltaopt's cost-benefit estimator: calibrated cost model, virtual-file benefit and the decision."""
