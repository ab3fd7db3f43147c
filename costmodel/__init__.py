"""deltaopt's cost and benefit arithmetic: the calibrated cost model, the query rate, benefit figures."""
