"""Representational geometry of feature spaces: dimensionality, spectra, class manifolds."""

from .metrics import (
    ClassGeometry,
    OODReadout,
    PowerLawFit,
    class_manifold_geometry,
    default_fit_range,
    eigenspectrum,
    ood_readout,
    participation_ratio,
    power_law_exponent,
)
from .stage import (
    DEFAULT_CONFIG,
    FORMAT_VERSION,
    geometry_of_features,
    geometry_table,
    plot_geometry,
    read_class_labels,
    read_held_out,
    resolve_config,
    write_geometry,
)

__all__ = [
    "DEFAULT_CONFIG",
    "FORMAT_VERSION",
    "ClassGeometry",
    "OODReadout",
    "PowerLawFit",
    "class_manifold_geometry",
    "default_fit_range",
    "eigenspectrum",
    "geometry_of_features",
    "geometry_table",
    "ood_readout",
    "participation_ratio",
    "plot_geometry",
    "power_law_exponent",
    "read_class_labels",
    "read_held_out",
    "resolve_config",
    "write_geometry",
]
