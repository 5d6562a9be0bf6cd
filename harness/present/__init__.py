"""The presentation wing: views of evidence, each built from bundles verified in-process.

Torch-free. :mod:`.verified` verifies a bundle with the trusted core (once per process) and
only then opens it; :mod:`.model` turns what verified into one model of the evidence
(release x path x implementation x workload x row); :mod:`.build` finds and verifies the
committed evidence in a process pool; :mod:`.site` renders the static site from the model,
:mod:`.results` the README's results section, and :mod:`.sections` is the one home of the
README sections' marker lines.
"""
