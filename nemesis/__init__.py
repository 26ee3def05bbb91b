"""Faults, grudges and fault schedules."""
