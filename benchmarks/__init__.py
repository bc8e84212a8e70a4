"""kinesis_spout's benchmarks: ``python -m benchmarks`` (``make bench``) runs them and writes ``results/``.

Each benchmark is a module listed in :mod:`benchmarks.registry` with a ``run(ctx, smoke) -> list[dict]``
function; :mod:`benchmarks.runner` runs them, :mod:`benchmarks.report` writes the JSON and Markdown results and
:mod:`benchmarks.chart` the PNG chart.
"""
