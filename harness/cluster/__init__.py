"""Cluster backends: netns (default), docker, ssh."""
