"""A methods paragraph for the report, written from the run's config and plan.

:func:`methods_rst` says what was done to the data in the words of a methods
section (preprocessing, quality control, features, models, statistics), with the
settings the run used and the citations of the methods and tools behind each step, so
that a reader of the report can check a run (and a writer can start from it). Only the
analyses the run performs are described.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["REFERENCES", "MethodsText", "RunFacts", "methods_rst"]

#: Citations by key, as they appear in the reference list.
REFERENCES: dict[str, str] = {
    "nilearn": (
        "Abraham A, Pedregosa F, Eickenberg M, et al. (2014). Machine learning for "
        "neuroimaging with scikit-learn. Frontiers in Neuroinformatics 8:14."
    ),
    "mne": (
        "Gramfort A, Luessi M, Larson E, et al. (2013). MEG and EEG data analysis with "
        "MNE-Python. Frontiers in Neuroscience 7:267."
    ),
    "mne_bids": (
        "Appelhoff S, Sanderson M, Brooks TL, et al. (2019). MNE-BIDS: Organizing "
        "electrophysiological data into the BIDS format and facilitating their analysis. "
        "Journal of Open Source Software 4(44):1896."
    ),
    "iclabel": (
        "Pion-Tonachini L, Kreutz-Delgado K, Makeig S (2019). ICLabel: An automated "
        "electroencephalographic independent component classifier, dataset, and website. "
        "NeuroImage 198:181-197."
    ),
    "glover": (
        "Glover GH (1999). Deconvolution of impulse response in event-related BOLD fMRI. "
        "NeuroImage 9(4):416-429."
    ),
    "spm_hrf": (
        "Friston KJ, Fletcher P, Josephs O, et al. (1998). Event-related fMRI: "
        "characterizing differential responses. NeuroImage 7(1):30-40."
    ),
    "himalaya": (
        "Dupré la Tour T, Eickenberg M, Nunez-Elizalde AO, Gallant JL (2022). "
        "Feature-space selection with banded ridge regression. NeuroImage 264:119728."
    ),
    "sklearn": (
        "Pedregosa F, Varoquaux G, Gramfort A, et al. (2011). Scikit-learn: Machine "
        "learning in Python. Journal of Machine Learning Research 12:2825-2830."
    ),
    "bh": (
        "Benjamini Y, Hochberg Y (1995). Controlling the false discovery rate: a practical "
        "and powerful approach to multiple testing. Journal of the Royal Statistical "
        "Society B 57(1):289-300."
    ),
    "by": (
        "Benjamini Y, Yekutieli D (2001). The control of the false discovery rate in "
        "multiple testing under dependency. Annals of Statistics 29(4):1165-1188."
    ),
    "westfall_young": (
        "Westfall PH, Young SS (1993). Resampling-Based Multiple Testing. Wiley, New York."
    ),
    "nichols_holmes": (
        "Nichols TE, Holmes AP (2002). Nonparametric permutation tests for functional "
        "neuroimaging: a primer with examples. Human Brain Mapping 15(1):1-25."
    ),
    "knijnenburg": (
        "Knijnenburg TA, Wessels LFA, Reinders MJT, Shmulevich I (2009). Fewer "
        "permutations, more accurate P-values. Bioinformatics 25(12):i161-i168."
    ),
    "schoppe": (
        "Schoppe O, Harper NS, Willmore BDB, King AJ, Schnupp JWH (2016). Measuring the "
        "performance of neural models. Frontiers in Computational Neuroscience 10:10."
    ),
    "nsd": (
        "Allen EJ, St-Yves G, Wu Y, et al. (2022). A massive 7T fMRI dataset to bridge "
        "cognitive neuroscience and artificial intelligence. Nature Neuroscience "
        "25:116-126."
    ),
    "rsa": (
        "Kriegeskorte N, Mur M, Bandettini P (2008). Representational similarity "
        "analysis - connecting the branches of systems neuroscience. Frontiers in "
        "Systems Neuroscience 2:4."
    ),
    "rsatoolbox": (
        "Nili H, Wingfield C, Walther A, et al. (2014). A toolbox for representational "
        "similarity analysis. PLoS Computational Biology 10(4):e1003553."
    ),
    "crossnobis": (
        "Walther A, Nili H, Ejaz N, et al. (2016). Reliability of dissimilarity measures "
        "for multi-voxel pattern analysis. NeuroImage 137:188-200."
    ),
    "he_wu": (
        "He H, Wu D (2020). Transfer learning for brain-computer interfaces: a Euclidean "
        "space data alignment approach. IEEE Transactions on Biomedical Engineering "
        "67(2):399-410."
    ),
    "king_dehaene": (
        "King J-R, Dehaene S (2014). Characterizing the dynamics of mental "
        "representations: the temporal generalization method. Trends in Cognitive "
        "Sciences 18(4):203-210."
    ),
    "maris": (
        "Maris E, Oostenveld R (2007). Nonparametric statistical testing of EEG- and "
        "MEG-data. Journal of Neuroscience Methods 164(1):177-190."
    ),
    "ledoit_wolf": (
        "Ledoit O, Wolf M (2004). A well-conditioned estimator for large-dimensional "
        "covariance matrices. Journal of Multivariate Analysis 88(2):365-411."
    ),
    "tribe": (
        "d'Ascoli S, Rapin J, Benchetrit Y, Banville H, King J-R (2025). TRIBE: TRImodal "
        "Brain Encoder for whole-brain fMRI response prediction. arXiv:2507.22229."
    ),
    "infonce": (
        "van den Oord A, Li Y, Vinyals O (2018). Representation learning with "
        "contrastive predictive coding. arXiv:1807.03748."
    ),
    "power_carpet": (
        "Power JD (2017). A simple but useful way to assess fMRI scan qualities. "
        "NeuroImage 154:150-158."
    ),
    "power_fd": (
        "Power JD, Barnes KA, Snyder AZ, Schlaggar BL, Petersen SE (2012). Spurious but "
        "systematic correlations in functional connectivity MRI networks arise from "
        "subject motion. NeuroImage 59(3):2142-2154."
    ),
}


class MethodsText(str):
    """A methods paragraph that shows itself short: its size and digest.

    The text itself wherever it is used as text (written to a file, joined, rendered
    into a template); ``repr`` and ``format`` (e.g. an f-string) give
    ``<methods: N characters, sha1 XXXXXXXXXX>`` instead, so that a workflow param
    holding it lists short in the report's info panel of every output of its job, while
    the job still reruns when the text changes (Snakemake compares a param by its
    ``repr``).
    """

    __slots__ = ()

    def _label(self) -> str:
        digest = hashlib.sha1(str.encode(self), usedforsecurity=False).hexdigest()[:10]
        return f"<methods: {len(self)} characters, sha1 {digest}>"

    def __repr__(self) -> str:
        return self._label()

    def __format__(self, spec: str) -> str:
        return format(self._label(), spec)

    def __reduce__(self) -> tuple[type, tuple[str]]:
        return MethodsText, (str(self),)


@dataclass(frozen=True)
class RunFacts:
    """What the plan decided the run does (see :class:`neuroflow.workflow.plan.WorkflowPlan`).

    Attributes
    ----------
    n_fmri_subjects, n_eeg_subjects : int
        Subjects with fMRI runs and with EEG recordings.
    encoding_models : sequence of str
        fMRI encoding models fitted.
    eeg_models : sequence of str
        EEG encoding models fitted.
    decoding : bool
        Whether EEG decoding runs.
    decoding_cross_subject : bool
        Whether EEG is decoded across subjects (or across a subject's sessions).
    decoding_fmri : str
        What fMRI decoding reads (``"trials"`` or ``"events"``), ``""`` when it does
        not run.
    rsa : sequence of str
        Modalities of the RSA (``"eeg"``, ``"fmri"``).
    extractors : sequence of dict
        The extractor entries that run (``name``, ``extractor``, ``model``).
    """

    n_fmri_subjects: int = 0
    n_eeg_subjects: int = 0
    encoding_models: Sequence[str] = ()
    eeg_models: Sequence[str] = ()
    decoding: bool = False
    decoding_cross_subject: bool = False
    decoding_fmri: str = ""
    rsa: Sequence[str] = ()
    extractors: Sequence[Mapping[str, Any]] = ()


def _cite(keys: list[str], *names: str) -> str:
    """Record the citations ``names`` and return their in-text markers ``[n]``."""
    for name in names:
        if name not in keys:
            keys.append(name)
    return "[" + ", ".join(str(keys.index(n) + 1) for n in names) + "]"


def _fmri_preprocessing(config: Mapping[str, Any], keys: list[str]) -> str:
    cfg = config["preprocess_fmri"]
    high_pass = cfg["high_pass"]
    parts = [
        f"BOLD runs were cleaned with nilearn {_cite(keys, 'nilearn')}: polynomial "
        f"detrending of order {cfg['detrend_order']}"
    ]
    if high_pass.get("filter") not in (None, "none"):
        parts.append(f"a {high_pass['filter']} high-pass filter at {high_pass['cutoff_hz']} Hz")
    if cfg["low_pass_hz"]:
        parts.append(f"a {cfg['low_pass_hz']} Hz low-pass filter")
    strategy = cfg["confounds"]["strategy"]
    if strategy:
        shown = strategy if isinstance(strategy, str) else ", ".join(map(str, strategy))
        parts.append(f"regression of the confounds ({shown})")
    if cfg["smoothing_fwhm"]:
        parts.append(f"{cfg['smoothing_fwhm']} mm FWHM smoothing")
    return ", ".join(parts) + "."


def _eeg_preprocessing(config: Mapping[str, Any], keys: list[str]) -> str:
    cfg = config["preprocess_eeg"]
    band = f"{cfg['l_freq']}-{cfg['h_freq']} Hz"
    text = (
        f"EEG recordings were read from BIDS with MNE-BIDS {_cite(keys, 'mne_bids')} and "
        f"processed with MNE-Python {_cite(keys, 'mne')}: band-pass filtered at {band}"
    )
    if cfg["notch_freq"]:
        text += ", line noise notched"
    bads = [
        label
        for key, label in (
            ("find_flat_channels", "flat"),
            ("find_noisy_channels", "noisy"),
            ("find_uncorrelated_channels", "uncorrelated"),
        )
        if cfg[key]
    ]
    if bads:
        text += f", {', '.join(bads)} channels marked bad"
        if cfg["interpolate_bads"]:
            text += " and interpolated"
    text += f", re-referenced ({cfg['eeg_reference']})"
    if cfg["spatial_filter"] == "ica":
        labelled = (
            f"labelled as artefacts by ICLabel {_cite(keys, 'iclabel')} (where mne-icalabel "
            "is installed) or "
            if cfg["ica_use_icalabel"]
            else ""
        )
        text += (
            f"; ICA ({cfg['ica_algorithm']}) removed components {labelled}"
            "correlated with EOG channels"
        )
    from neuroflow.preprocessing.eeg.config import epoch_window

    tmin, tmax = epoch_window(cfg)
    auto = "auto" in (cfg["epochs_tmin"], cfg["epochs_tmax"])
    stored = " (epoched inputs: their stored window)" if auto else ""
    text += f"; epochs spanned {tmin:g} to {tmax:g} s around each event{stored}."
    return text


def _quality_control(config: Mapping[str, Any], facts: RunFacts, keys: list[str]) -> str:
    """What the ``qc_eeg`` and ``qc_fmri`` stages compute (see :mod:`neuroflow.qc`)."""
    if not config["qc"]["enabled"]:
        return ""
    sentences = []
    eeg = config["preprocess_eeg"]
    if facts.n_eeg_subjects and eeg.get("enabled", True):
        ica = ", the ICA components removed" if eeg.get("spatial_filter") == "ica" else ""
        sentences.append(
            "Quality control of each EEG recording, computed and drawn with MNE-Python "
            f"{_cite(keys, 'mne')}, comprised the Welch power spectrum of each channel "
            "before and after preprocessing, the power per channel in the delta (1-4 Hz), "
            "theta (4-8 Hz), alpha (8-13 Hz), beta (13-30 Hz) and gamma (30-45 Hz) bands "
            "after preprocessing, the channels flagged bad with their reasons "
            f"(and whether they were interpolated){ica}, the drop log (why each rejected "
            "epoch was dropped), the number of epochs kept per condition and the evoked "
            "response (mean of the kept epochs) over all conditions and per condition."
        )
    if facts.n_fmri_subjects and config["dataset"].get("source") != "timeseries":
        sentences.append(
            "Quality control of each fMRI run, drawn with nilearn "
            f"{_cite(keys, 'nilearn')} from the raw BOLD signal (the voxels the cleaning "
            "kept, non-steady-state volumes left out), comprised maps of the temporal mean "
            "and of the temporal SNR (mean over the standard deviation of the linearly "
            f"detrended signal), a carpet plot {_cite(keys, 'power_carpet')}, the "
            f"framewise displacement {_cite(keys, 'power_fd')}, DVARS and global signal "
            "over time with the scrubbed volumes, the confounds the cleaning used, and the "
            "fraction of each voxel's variance explained by each nuisance set the cleaning "
            "used (polynomial trends, cosine drifts, each set of confounds) and by its "
            "whole design (least-squares R²)."
        )
    return " ".join(sentences)


def _features(config: Mapping[str, Any], facts: RunFacts) -> str:
    from neuroflow.features.inventory import WEIGHT_FREE

    if not facts.extractors:
        return ""
    names = []
    for entry in facts.extractors:
        described = entry["extractor"]
        if entry["extractor"] not in WEIGHT_FREE and entry.get("model"):
            described += f", {entry['model']}"
            if entry.get("weights") == "random":
                described += ", random weights"
        names.append(f"{entry['name']} ({described})")
    text = "Stimulus features were extracted offline by " + "; ".join(names)
    if facts.encoding_models:
        method = config["features"]["alignment"]["method"]
        text += f", and aligned to each fMRI run's TR grid ({method})"
    return text + "."


def _cv_text(cv: Any) -> str:
    """``leave-one-run-out`` or ``grouped k-fold`` from ``encoding.cv``."""
    if isinstance(cv, Mapping) and "grouped_kfold" in cv:
        return f"grouped {cv['grouped_kfold']}-fold"
    return str(cv)


def _encoding(config: Mapping[str, Any], facts: RunFacts, keys: list[str]) -> str:
    cfg = config["encoding"]
    delays = cfg["delays"]
    if delays["method"] == "hrf" and isinstance(delays["hrf_model"], list | tuple):
        models = [str(m) for m in delays["hrf_model"]]
        cite = _cite(keys, *sorted({"glover" if m == "glover" else "spm_hrf" for m in models}))
        lag = (
            f"convolved with each haemodynamic response function of a library "
            f"({', '.join(models)}) {cite}, one fit per function and, per voxel, the one "
            "that cross-validated best on the training runs (for banded ridge, the one "
            "ridge regression on the same design chose, and one banded fit per function)"
        )
    elif delays["method"] == "hrf":
        hrf = delays["hrf_model"]
        cite = _cite(keys, "glover" if hrf == "glover" else "spm_hrf")
        lag = f"convolved with the {hrf} haemodynamic response function {cite}"
    elif delays["method"] == "fir":
        lag = f"delayed by {delays['lags']} TRs (finite impulse response)"
    else:
        lag = "without delays"
    alphas = cfg["alphas"]
    transformers = [
        m
        for m in facts.encoding_models
        if (cfg["models"].get(m) or {}).get("model") == "transformer"
    ]
    text = _transformer_text(cfg, transformers, keys) if transformers else ""
    linear = [m for m in facts.encoding_models if m not in transformers]
    if not linear:
        return text.lstrip()
    return (
        f"Encoding models ({', '.join(linear)}) mapped the features, "
        f"{lag}, to every voxel with ridge regression (banded ridge for several feature "
        f"spaces {_cite(keys, 'himalaya')}); the penalty of each target was chosen among "
        f"{alphas['num']} values from 1e{alphas['start']:g} to 1e{alphas['stop']:g} by "
        f"{_cv_text(cfg['cv'])} cross-validation on the "
        f"training runs ({cfg['scoring']}), and each model was scored by the Pearson "
        "correlation between predicted and measured responses on held-out runs never used "
        "in fitting." + text
    )


def _transformer_text(cfg: Mapping[str, Any], models: Sequence[str], keys: list[str]) -> str:
    """A sentence on the transformer encoding models (their first model's options)."""
    from neuroflow.config.transformer_options import resolve_options

    opts = resolve_options(cfg["models"][models[0]].get("transformer"))
    return (
        f" The transformer encoding model(s) ({', '.join(models)}), after TRIBE "
        f"{_cite(keys, 'tribe')}, projected each feature space to {opts['hidden']} "
        f"dimensions, encoded {opts['window']} windows of {opts['window_trs']} TRs with a "
        f"{opts['n_layers']}-layer transformer and mapped them to each subject's voxels "
        f"with a subject-specific linear head; they were trained on every subject's "
        f"training runs at once ({opts['loss']} loss, AdamW with a one-cycle schedule, "
        f"modality dropout {opts['modality_dropout']}, early stopping on the last "
        f"{opts['validation_runs']} training run(s) of each subject), and the predictions "
        f"of {len(opts['seeds'])} seed(s) were averaged."
    )


def _evaluation(config: Mapping[str, Any], keys: list[str]) -> str:
    cfg = config["evaluation"]
    perm = cfg["permutation"]
    text = (
        f"Significance came from {perm['n_permutations']} {perm['method']} permutations of "
        f"the held-out predictions {_cite(keys, 'nichols_holmes')}"
    )
    if perm["tail"] == "gpd":
        text += f", with a generalized Pareto tail {_cite(keys, 'knijnenburg')} for p-values "
        text += "below the permutation resolution"
    elif perm["tail"] == "gaussian":
        text += ", with a Gaussian approximation of the Fisher-z null for p-values below "
        text += "the permutation resolution"
    fdr = cfg["fdr"]
    text += (
        f"; the false discovery rate was controlled at q = {fdr['alpha']} "
        f"{_cite(keys, fdr['method'])}"
    )
    if cfg["fwer"]["enabled"]:
        text += (
            f" and the family-wise error at {cfg['fwer']['alpha']} by the maximum statistic "
            f"over {cfg['fwer']['family']} {_cite(keys, 'westfall_young')}"
        )
    ceiling = cfg["noise_ceiling"]
    if ceiling["method"] == "split_half":
        text += (
            f". Noise ceilings were Spearman-Brown corrected split-half reliabilities "
            f"{_cite(keys, 'schoppe')}"
        )
    elif ceiling["method"] == "ncsnr":
        text += f". Noise ceilings came from the noise-ceiling SNR {_cite(keys, 'nsd')}"
    if ceiling["method"] != "none":
        text += (
            f"; scores were normalised by the ceiling only where it exceeded "
            f"r = {ceiling['min_ceiling_r']}"
        )
    return text + "."


def _decoding(config: Mapping[str, Any], keys: list[str]) -> str:
    cfg = config["decoding"]
    parts = []
    if cfg["classification"]["enabled"]:
        parts.append(
            f"time-resolved classification ({cfg['classification']['classifier']}, shrinkage "
            f"covariance {_cite(keys, 'ledoit_wolf')}) with temporal generalisation "
            f"{_cite(keys, 'king_dehaene')}"
        )
    if cfg["features"]["enabled"]:
        parts.append("ridge decoding of the features' principal components over time")
    if cfg["identification"]["enabled"]:
        decoders = "ridge"
        if cfg["contrastive"]["enabled"]:
            decoders += f" and contrastive (InfoNCE {_cite(keys, 'infonce')})"
        parts.append(f"identification of held-out stimuli with {decoders} decoders")
    if not parts:
        return ""
    return (
        "EEG decoding comprised "
        + "; ".join(parts)
        + f", in grouped {cfg['n_splits']}-fold cross-validation; time courses were tested "
        f"with cluster-based permutation tests {_cite(keys, 'maris')} at alpha = "
        f"{cfg['cluster_alpha']}."
    )


def _cross_subject(config: Mapping[str, Any], keys: list[str]) -> str:
    cfg = config["decoding"]["cross_subject"]
    session = cfg["cv"] == "leave-one-session-out"
    held_out = "each session of a subject" if session else "each subject"
    others = "that subject's other sessions" if session else "the other subjects"
    names = {
        "time_resolved": "shrinkage LDA at every time point",
        "epoch_lda": "shrinkage LDA on whole epochs",
        "tangent_space": "logistic regression on tangent-space covariances",
    }
    text = (
        f"Cross-{'session' if session else 'subject'} EEG decoding scored {held_out} in turn "
        f"with classifiers trained on {others} "
        f"({', '.join(names[c] for c in cfg['classifiers'])}; balanced accuracy), on the "
        "channels every recording shared"
    )
    if cfg["alignment"] == "euclidean":
        text += (
            f", with and without Euclidean alignment {_cite(keys, 'he_wu')} of each "
            f"{'session' if session else 'subject'}'s epochs"
        )
    return text + "."


def _fmri_decoding(config: Mapping[str, Any], patterns: str, keys: list[str]) -> str:
    cfg = config["decoding"]
    source = (
        "single-trial response estimates"
        if patterns == "trials"
        else f"the mean BOLD over each stimulus event shifted by {cfg['fmri']['hrf_lag']} s"
    )
    decoders = "ridge"
    if cfg["contrastive"]["enabled"]:
        decoders += f" and contrastive (InfoNCE {_cite(keys, 'infonce')})"
    text = (
        f"fMRI decoding used {source}, per region of interest: held-out stimuli were "
        f"identified among each other from features predicted by {decoders} decoders "
        "(top-k accuracy and mean rank, with a label-shuffle null)"
    )
    cv = cfg["fmri"]["cv"]
    if cv == "leave-one-subject-out":
        text += (
            "; the decoders of each subject were trained on the other subjects' "
            "presentations, on the targets all subjects share"
        )
    elif cv == "leave-one-session-out":
        text += (
            "; each session's test presentations were decoded by decoders trained on that "
            "subject's other sessions (test stimuli never in training), and the sessions' "
            "scores and null distributions averaged per subject"
        )
    if cfg["fmri"]["concepts"]["enabled"]:
        text += (
            ", and concept labels were decoded with one-vs-rest logistic regressions in "
            "folds that kept the stimuli of each run together (ROC AUC and average "
            f"precision per concept against {cfg['fmri']['concepts']['n_permutations']} "
            "label shuffles), where a concept annotation table was given"
        )
    return text + "."


def _rsa(config: Mapping[str, Any], facts: RunFacts, keys: list[str]) -> str:
    cfg = config["rsa"]
    text = (
        f"Representational similarity analysis {_cite(keys, 'rsa')} compared brain and "
        f"model dissimilarity matrices with rsatoolbox {_cite(keys, 'rsatoolbox')} "
        f"({', '.join(cfg['comparisons'])})"
    )
    if "fmri" in facts.rsa and cfg["fmri_rdm"] == "crossnobis":
        text += f"; fMRI matrices were crossnobis distances {_cite(keys, 'crossnobis')}"
    boot = cfg["bootstrap"]
    if boot["over"] != "none":
        over = {"auto": "stimuli and/or subjects", "both": "stimuli and subjects"}.get(
            boot["over"], boot["over"]
        )
        text += (
            f"; {round(100 * boot['level'])} % percentile confidence intervals and "
            f"pairwise layer comparisons came from {boot['n_bootstraps']} bootstrap "
            f"samples of the {over}"
        )
    return text + "."


def methods_rst(config: Mapping[str, Any], facts: RunFacts) -> MethodsText:
    """A methods paragraph with numbered citations, as reStructuredText.

    Parameters
    ----------
    config : dict
        The validated config of the run.
    facts : RunFacts
        What the run does.

    Returns
    -------
    text : MethodsText
        Paragraphs for the analyses the run performs, then the references cited (a
        ``str`` whose ``repr`` is short, see :class:`MethodsText`).
    """
    keys: list[str] = []
    paragraphs = []
    if facts.n_fmri_subjects:
        paragraphs.append(_fmri_preprocessing(config, keys))
    if facts.n_eeg_subjects:
        paragraphs.append(_eeg_preprocessing(config, keys))
    paragraphs.append(_quality_control(config, facts, keys))
    paragraphs.append(_features(config, facts))
    if facts.encoding_models:
        paragraphs.append(_encoding(config, facts, keys))
    if facts.eeg_models:
        paragraphs.append(
            f"EEG encoding models ({', '.join(facts.eeg_models)}) predicted each channel "
            "and latency from the stimulus features with ridge regression, scored on "
            "held-out stimuli."
        )
    if facts.encoding_models or facts.eeg_models:
        paragraphs.append(_evaluation(config, keys))
    if facts.decoding:
        paragraphs.append(_decoding(config, keys))
    if facts.decoding_cross_subject:
        paragraphs.append(_cross_subject(config, keys))
    if facts.decoding_fmri:
        paragraphs.append(_fmri_decoding(config, facts.decoding_fmri, keys))
    if facts.rsa:
        paragraphs.append(_rsa(config, facts, keys))
    body = "\n\n".join(p for p in paragraphs if p)
    references = "\n".join(f"{i}. {REFERENCES[key]}" for i, key in enumerate(keys, 1))
    return MethodsText(f"{body}\n\n**References**\n\n{references}\n" if keys else body + "\n")
