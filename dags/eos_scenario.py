"""eos_scenario: one scenario on one target, triggered by hand from the form.

lab health, then producers (and consumers, in a handler mode) ∥ nemesis (`eoslab run`, which
creates the topic) once the target's lane is free → the checker's Spark job (anomalies, GX
suites, verdict; on the lab's warm Spark) → publish the verdict, the run's report and the GX
results → conformance (red when the run does not conform or is invalid: a fault that did not
take effect).
"""

from __future__ import annotations

from airflow.sdk import DAG, Param

from eoslab.orchestration import tasks
from eoslab.rundir import GROUP_PROTOCOLS, HANDLER_MODES, LAB_TARGETS
from eoslab.scenarios.catalogue import catalogue

with DAG(
    dag_id="eos_scenario",
    schedule=None,
    catchup=False,
    max_active_runs=1,  # a second run would wait for the target's lane (its lock) anyway
    max_active_tasks=1,
    default_args={"retries": 0},
    render_template_as_native_obj=True,  # params reach the tasks as ints, dicts, None
    tags=["eoslab"],
    doc_md=__doc__,
    params={
        "scenario": Param(
            "baseline", type="string", enum=sorted(catalogue()), description="Catalogue scenario."
        ),
        "target": Param(
            "kafka", type="string", enum=list(LAB_TARGETS), description="System under test."
        ),
        "records": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            description="Records (empty: the scenario's).",
        ),
        "producer_overrides": Param(
            {},
            type="object",
            description='librdkafka properties over the scenario\'s, e.g. {"linger.ms": 5}.',
        ),
        "mode": Param(
            None,
            type=["null", "string"],
            enum=[None, *HANDLER_MODES],
            description="Consumers in this handler mode (empty: the scenario's own, if any; "
            "a producer scenario gets the default consumer workload).",
        ),
        "client": Param(
            None,
            type=["null", "string"],
            pattern=r"^((librdkafka|java|franz-go):)?[A-Za-z0-9][A-Za-z0-9._-]*$",
            description="The client every role runs: java:3.9.2 (Kafka's Java client, any "
            "release on Maven Central), franz-go:v1.22.2 (any franz-go module version), "
            "librdkafka:2.2.0 (an older librdkafka make setup installed); built on first use "
            "(empty: the workload's own librdkafka).",
        ),
        "group_protocol": Param(
            None,
            type=["null", "string"],
            enum=[None, *GROUP_PROTOCOLS],
            description="The consumers' group protocol: classic, or consumer (KIP-848, "
            "target kafka4 only; empty: the scenario's, classic).",
        ),
        "seed": Param(None, type=["null", "integer"], description="Seed (empty: the scenario's)."),
    },
) as dag:
    run_dir = tasks.run_scenario(
        scenario="{{ params.scenario }}",
        target="{{ params.target }}",
        records="{{ params.records }}",
        seed="{{ params.seed }}",
        producer_overrides="{{ params.producer_overrides }}",
        mode="{{ params.mode }}",
        client="{{ params.client }}",
        group_protocol="{{ params.group_protocol }}",
    )
    headline = tasks.publish(run_dir)
    tasks.spark_checker(run_dir) >> headline
    tasks.conformance(headline)
