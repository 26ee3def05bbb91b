"""Shared fixtures for the checker tests.

`spark`: one SparkSession for the whole test session (JVM start-up on two
cores takes half a minute; every Spark test reuses it). Small shuffle width:
test data is tiny.
"""

import pytest


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from checkers.spark.session import spark_session, stop_spark_session

    session = spark_session(shuffle_partitions=2)
    yield session
    stop_spark_session()
