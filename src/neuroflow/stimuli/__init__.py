"""Stimuli: their files, and the loading of each medium.

Stimulus ids are the ``stim_file`` strings of BIDS events: paths relative to the
dataset's ``stimuli/`` folder (:mod:`neuroflow.stimuli.files` finds their files,
inside the dataset only). Loaded stimuli have one type per modality:

- image: ``ndarray, shape (H, W, 3)``, float32 in [0, 1]
  (:mod:`neuroflow.stimuli.image`);
- video: :class:`neuroflow.stimuli.video.Video` (frames ``(n_frames, H, W, 3)``
  float32 in [0, 1] and fps);
- audio: :class:`neuroflow.stimuli.audio.Audio` (mono float32 waveform and
  sampling rate);
- text: ``str`` (the caption, possibly preceded by context words;
  :mod:`neuroflow.stimuli.text`).

:func:`neuroflow.stimuli.load.load_stimulus` loads one image, video or sound.

Time-continuous designs expand one stimulus into several rows:

- a video sampled at ``frame_rate`` gives one row per sampled frame, id
  ``<stim_file>#t=<seconds>`` (:func:`neuroflow.stimuli.video.frame_id`,
  :func:`neuroflow.stimuli.video.frame_times`); windowed extractors read the clip
  or the sound before each sampled time instead (:mod:`neuroflow.features.windows`;
  a video is heard from the WAV file of the same name,
  :func:`neuroflow.stimuli.audio.soundtrack_files`), with the same ids;
- a narrative gives one text row per word, id ``<stim_file>#w=<index>``
  (:func:`neuroflow.stimuli.text.word_id`,
  :func:`neuroflow.stimuli.text.read_transcript`), either from word events of the
  BIDS ``_events.tsv`` (a word column) or from a transcript TSV named by
  ``stim_file`` (columns word, ``onset`` and ``duration`` in seconds from the
  event's onset).
"""
