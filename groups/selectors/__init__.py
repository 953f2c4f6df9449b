"""Reads. Keyword-only, typed, named ``<entity>_<action>``; pages, the API,
the metrics endpoint, the watcher and the poll's write call these and never
build querysets themselves. One module per face: ``lists`` (the lists pages
and API share), ``browse`` (the topic, group and audit pages), ``metrics``
(the /metrics endpoint), ``watcher`` (what the watcher compares) and
``polls`` (the stored state a poll's write starts from).
"""
