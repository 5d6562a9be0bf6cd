"""What a mutation run's signed summary is: its schema id and its DSSE payload type. One
home for both: :mod:`harness.mutation.mutate` writes summaries, :mod:`harness.mutation.
mutation_check` checks them, and neither imports the other for these."""

SUMMARY_SCHEMA = "topp-gate/mutation/v1"
SUMMARY_PAYLOAD_TYPE = "application/vnd.topp-gate.mutation+json"
