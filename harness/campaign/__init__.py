"""Campaigns: a matrix of runs that runs unattended, resumes after a kill,
is checked in one Spark job and leaves one page and one JUnit file.

campaign file (spec) -> matrix of cells and runs (matrix) -> campaign folder
with its plan and event log (folder) -> each run a `harness run` /
`harness scenario` subprocess (launch, execute) -> one Spark check (check)
-> cell outcomes, time to first anomaly, comparison with the previous
campaign (outcome) -> index.html (reports.campaign) and JUnit XML (harness.junit).
"""
