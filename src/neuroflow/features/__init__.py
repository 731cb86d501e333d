"""Stimulus feature extraction and alignment to brain sampling."""
