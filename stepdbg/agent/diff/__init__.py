"""`stepdbg diff`'s agent side: fingerprints of a run's steps (fingerprint.py), recorded
while the job runs (recorder.py), for the command line to compare (stepdbg/wire/step_diff.py)."""
