"""``make scale``: the scale benchmark (lease workers on nodes of their own); see :mod:`benchmarks.scale.runner`."""
