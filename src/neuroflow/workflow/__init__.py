"""Workflow glue: stage graph, version ids, result paths and the job runner."""

from neuroflow.workflow.plan import WorkflowPlan
from neuroflow.workflow.versions import FORMAT_VERSIONS, STAGES, stage_versions

__all__ = ["FORMAT_VERSIONS", "STAGES", "WorkflowPlan", "stage_versions"]
