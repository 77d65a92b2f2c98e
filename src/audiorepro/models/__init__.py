"""Everything that loads weights or runs an encoder: the encoder interface and its specs.

Any encoder goes through one interface (:mod:`.encoder`, :mod:`.embedder`): the CLAP pipelines
(Hugging Face and laion-clap, :mod:`.pipelines`, :mod:`.mapping`), a user's own code
(``py:`` factories, ``hear:`` modules and entry-point plugins, :mod:`.user_encoders`,
:mod:`.encoder_specs`), bundled wrappers of third-party encoders (:mod:`.resemblyzer`) and the
seeded tiny models (:mod:`.tiny`, :mod:`.seeded`). Beside it: the checkpoint registry
(:mod:`.registry`), extraction to dumps (:mod:`.extract`, :mod:`.extract_jobs`), checkpoint
identity (:mod:`.identity`), safe loading and preflight checks, and the offline stand-ins.
"""
