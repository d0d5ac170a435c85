"""The in-cluster install of tests/controller/test_in_cluster.py, shared with these tests."""

from tests.controller.test_in_cluster import cluster as cluster
