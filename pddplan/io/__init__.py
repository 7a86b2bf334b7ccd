"""Files in and out: YAML read once with the line of every key (``located``), validation into
the spec with located messages, the catalogs, a scenario loaded into a ``Problem`` (a trace
fitted on the way), fleet and plan files, Hugging Face ``config.json`` import, and the
fitted-workload writer. The only package that knows YAML. May import: ``calibration``,
``horizon``, ``model``, ``workload``, ``spec``, ``catalogs``, ``atomic``, ``pipes``, ``units``, ``errors``."""
