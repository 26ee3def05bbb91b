"""pyarrow schema -> Spark schema, so Parquet files are read with the types we wrote."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as T

_TYPES = {
    pa.string(): T.StringType(),
    pa.int64(): T.LongType(),
    pa.int32(): T.IntegerType(),
    pa.bool_(): T.BooleanType(),
}


def spark_schema(schema: pa.Schema) -> T.StructType:
    return T.StructType([T.StructField(f.name, _TYPES[f.type], True) for f in schema])
