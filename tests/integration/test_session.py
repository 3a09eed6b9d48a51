"""register(spark): configuration resolved on the driver, from the conf dir that Spark conf
names, with errors naming file and line; re-registration is how a session changes config."""

import pytest

from raptorx_py.session import register

pytestmark = pytest.mark.spark


@pytest.fixture
def restore(spark, env):
    yield
    spark.conf.unset("spark.raptorx.conf.dir")
    register(spark, properties=env.properties)


def test_conf_dir_from_spark_conf_wins_over_env(spark, env, tmp_path, monkeypatch, restore):
    mine, other = tmp_path / "mine", tmp_path / "other"
    for d, dirs in ((mine, "42"), (other, "7")):
        d.mkdir()
        (d / "hive.properties").write_text(f"hive.s3.max-error-retries={dirs}\n")
    monkeypatch.setenv("RAPTORX_CONF_DIR", str(other))
    spark.conf.set("spark.raptorx.conf.dir", str(mine))
    settings = register(spark, properties=env.properties)
    assert settings.s3_max_error_retries == 42
    spark.conf.unset("spark.raptorx.conf.dir")
    assert register(spark, properties=env.properties).s3_max_error_retries == 7


def test_bad_conf_file_fails_at_register_naming_file_and_line(spark, env, tmp_path, restore):
    (tmp_path / "hive.properties").write_text("# ok\nhive.s3.path-style-access=maybe\n")
    with pytest.raises(
        ValueError,
        match=r"hive.properties:2, property "
        r"'hive.s3.path-style-access'",
    ):
        register(spark, conf_dir=str(tmp_path), properties=env.properties)


def test_min_split_count_defaults_to_the_task_slots(spark, env, restore):
    slots = spark.sparkContext.defaultParallelism
    assert register(spark, properties=env.properties).min_split_count == slots
    explicit = register(spark, properties={**env.properties, "hive.min-split-count": "5"})
    assert explicit.min_split_count == 5


def test_filter_pushdown_is_switched_on(spark):
    assert spark.conf.get("spark.sql.python.filterPushdown.enabled") == "true"
