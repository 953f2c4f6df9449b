# Images of docker-compose.yml: the app (web server, Celery worker and beat;
# the last stage, built by default) and, with `--target spark`, the Spark image
# of the Spark Connect server and the optional standalone master and worker.
FROM maven:3.9-eclipse-temurin-17 AS jars
WORKDIR /src
COPY third_party/maven third_party/maven
RUN mvn -q -B -s third_party/maven/settings.xml -f third_party/maven/pom.xml dependency:copy-dependencies \
    -Djars.dir=/jars

# Apache Spark's official image (the version of the app's pyspark) plus what
# backfills need on the Spark side:
# - the Kafka connector jars, given to the Connect server with --jars
#   (executors fetch them from the driver);
# - a Python 3.11 with pyarrow (and pandas) for the handler sink's Python
#   workers (mapInArrow). The official image has no pyarrow, and its python3
#   (Ubuntu 22.04's 3.10) cannot run them anyway: PySpark refuses a Python
#   worker whose major.minor differs from the client's (the Celery worker's:
#   3.11, the app image below). Ubuntu 22.04 has python3.11 in universe.
#   PYSPARK_PYTHON names it; a cluster's executors need it at the same path,
#   which they have when they run this image too (compose profile "cluster").
# The Parquet and replay-topic sinks need no Python on the Spark side.
# Untested: Docker does not run on the machine this was written on.
FROM apache/spark:4.2.0-scala2.13-java17-ubuntu AS spark
USER root
RUN set -ex; \
    apt-get update; \
    apt-get install -y --no-install-recommends python3.11 python3.11-venv; \
    rm -rf /var/lib/apt/lists/*; \
    python3.11 -m venv /opt/gapwatch/python; \
    /opt/gapwatch/python/bin/pip install --no-cache-dir "pyarrow>=18" "pandas>=2.2,<3"
COPY --from=jars /jars/spark /opt/gapwatch/spark-jars
ENV PYSPARK_PYTHON=/opt/gapwatch/python/bin/python
USER spark

FROM python:3.11-slim
# python-ldap (LDAP login, under django-auth-ldap) has no wheel: it is built against OpenLDAP's and SASL's headers.
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    gcc libc6-dev libldap2-dev libsasl2-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY controlplane controlplane
COPY groups groups
COPY tasks tasks
COPY adapters adapters
COPY guard guard
COPY templates templates
COPY manage.py .
# The guard (./guard, not on PyPI) holds the Redis key layout the control plane writes.
RUN pip install --no-cache-dir ./guard .
COPY --from=jars /jars/spark /opt/gapwatch/spark-jars
ENV SPARK_KAFKA_JARS_DIR=/opt/gapwatch/spark-jars PYTHONUNBUFFERED=1
RUN SECRET_KEY=build python manage.py collectstatic --noinput -v0
EXPOSE 8000
CMD ["gunicorn", "-c", "python:controlplane.gunicorn_conf", "controlplane.wsgi"]
