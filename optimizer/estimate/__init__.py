"""The estimate step of a tick: the workload replayed on virtual files of a sample, priced with the
cost model (`costmodel`), and the decision. Spark does the data work; `costmodel` only the arithmetic."""
