"""Reading datasets: BIDS indexing and per-recording file records."""
