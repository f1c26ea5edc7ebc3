"""What breaks things (Jepsen's nemesis): scenario steps, one file per kind in `steps/`, played
on a timeline beside the workload (`timeline.py`) by the :class:`~eoslab.nemesis.nemesis.Nemesis`,
which remembers what it broke and heals it at the end."""
