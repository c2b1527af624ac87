"""Kubeflow pipelines: DAG wiring only, no training logic."""
