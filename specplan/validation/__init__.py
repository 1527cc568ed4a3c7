"""Every "predicted vs measured" in one place: kernel tables, framework fits, serving runs, MagicDec sweeps,
parallel layouts, the H200 step and EAGLE-3 sweeps. Each report is a function behind a `specplan validate-*`
command; scripts/ only call these."""
