"""Preprocessing of brain recordings (fMRI cleaning, EEG cleaning and epoching)."""
