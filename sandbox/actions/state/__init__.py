"""The Actions service's state by entity: `records` (the dataclasses and errors), `data` (the
tables, settings and change notification), `scale_sets`, `sessions`, `queues`, `jobs` and
`runners` (the behaviour of each), and `service` (ServiceState, the facade over them)."""
