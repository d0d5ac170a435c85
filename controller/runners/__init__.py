"""What the reconcilers of runners share: the Actions client pool, the proxy and CA resolution
of a runner spec, the failure and replacement policies, the building blocks of runner objects."""
