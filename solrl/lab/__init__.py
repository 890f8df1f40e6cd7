"""The convergence study (`solrl bench convergence`): the rollout families, or objectives x families, trained
under one time budget over several seeds, and what the runs show.

families.py (which presets and variants) -> convergence.py / objectives.py (run them, read their logs back)
-> statistics.py (means over seeds, intervals, time to target per family, the target sweep; the per-seed
primitives are reporting/time_to_target.py's) -> convergence_report.py (convergence.md/.json/.png). The lab
sits above training/ and reporting/: it runs the Trainer and reads what it logged; nothing below imports it.
"""
