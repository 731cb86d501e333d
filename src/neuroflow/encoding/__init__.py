"""Encoding stage: stimulus features to brain responses."""

import lazy_loader

# Names load their submodule on first use, so that importing one submodule (or this
# package, in a job that needs one part) does not import the others' dependencies.
__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "fitting": ["make_alphas"],
        "runs": ["group_repeats"],
        "stage": ["DEFAULT_CONFIG", "fit_encoding", "with_defaults"],
        "trials": ["fit_trial_encoding"],
    },
)
