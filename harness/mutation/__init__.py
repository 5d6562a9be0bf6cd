"""Mutation testing of the gate: the catalogues, the runs (``topp-gate mutate``, each
mutant a ``pr`` run) and the check of a run's signed summary."""
