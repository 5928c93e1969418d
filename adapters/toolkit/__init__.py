"""What every adapter's reproduction script is made of: a standard-library runtime
(``repro_runtime.py``: effect log, crash points, a child process that kills itself) whose
functions are copied into a script by name, and the generator (``script.py``: ``Script``) that
stitches a workflow definition, the calls an adapter recorded and the check."""
