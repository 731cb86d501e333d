"""Representational geometry of feature spaces: dimensionality, spectra, class manifolds."""

import lazy_loader

# Names load their submodule on first use, so that importing one submodule (or this
# package, in a job that needs one part) does not import the others' dependencies.
__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "metrics": [
            "ClassGeometry",
            "OODReadout",
            "PowerLawFit",
            "class_manifold_geometry",
            "default_fit_range",
            "eigenspectrum",
            "ood_readout",
            "participation_ratio",
            "power_law_exponent",
        ],
        "labels": ["read_class_labels", "read_held_out"],
        "plotting": ["plot_geometry"],
        "stage": [
            "DEFAULT_CONFIG",
            "FORMAT_VERSION",
            "geometry_of_features",
            "geometry_table",
            "resolve_config",
            "write_geometry",
        ],
    },
)
