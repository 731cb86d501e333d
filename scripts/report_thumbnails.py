"""Thumbnails of a job's figures for the report; the full-size figures stay where they are."""

from pathlib import Path

from neuroflow.figures import THUMBNAIL_SUFFIXES, write_thumbnail, write_thumbnails
from neuroflow.workflow.runner import job_logging

settings = {k: snakemake.params[k] for k in ("max_side", "max_bytes", "formats")}
source, target = Path(snakemake.input.figures), Path(snakemake.output.thumbnails)
with job_logging(snakemake.log[0] if len(snakemake.log) else None) as log:
    if source.is_dir():
        written = write_thumbnails(source, target, **settings)
    else:  # one file: the format its name asks for
        settings["formats"] = [
            f for f in settings["formats"] if THUMBNAIL_SUFFIXES[f] == target.suffix
        ]
        written = [write_thumbnail(source, target, **settings)]
    for path in written:
        log.info("thumbnail %s (%d bytes)", path, path.stat().st_size)
