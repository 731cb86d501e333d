"""Workflow glue: stage graph, version ids, result paths and the job runner."""

from neuroflow.workflow.plan import WorkflowPlan, stage_versions
from neuroflow.workflow.versions import FORMAT_VERSIONS, STAGES

__all__ = ["FORMAT_VERSIONS", "STAGES", "WorkflowPlan", "stage_versions"]
