"""Replays of sampler bugs that shipped upstream (issue 36): one frozen ``replay.json`` per
bug (:mod:`.spec`), gated by ``topp-gate replay`` as an upgrade from the broken release to the
fixed one (:mod:`.run`), and what a verified bundle says of it (:mod:`.outcome`).

:mod:`.spec` and :mod:`.outcome` read only the standard library and the trusted core, so the
evidence table and the site can use them with the base install.
"""
