"""The ROI label of targets outside every region, and the regions of a ``roi`` coordinate.

Voxels that no atlas region covers are labelled :data:`UNLABELLED` in every store (stores
of earlier versions left them ``""``; both are read as unlabelled). Such targets count in
the whole-brain summaries (``roi = "all"``) but form no region of their own.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["ALL_ROI", "GROUP_SUBJECT", "UNLABELLED", "is_labelled", "labelled_rois"]

#: ROI label of targets outside every atlas region.
UNLABELLED = "unlabelled"
#: ROI label of the summary row over every target.
ALL_ROI = "all"
#: Subject label of across-subject summary rows.
GROUP_SUBJECT = "group"

_UNLABELLED = frozenset({"", UNLABELLED})


def is_labelled(label: object) -> bool:
    """Whether ``label`` names a region (not :data:`UNLABELLED` nor ``""``)."""
    return str(label) not in _UNLABELLED


def labelled_rois(labels: Iterable[object]) -> list[str]:
    """The distinct region names among ``labels``, sorted, unlabelled targets left out.

    Parameters
    ----------
    labels : iterable, shape (n_targets,)
        A ``roi`` coordinate's values.

    Returns
    -------
    rois : list of str
    """
    return sorted({str(v) for v in labels} - _UNLABELLED)
