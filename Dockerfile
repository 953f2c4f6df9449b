# Image for the web server, the Celery worker and beat (docker-compose.yml).
FROM maven:3.9-eclipse-temurin-17 AS jars
WORKDIR /src
COPY services/maven services/maven
RUN mvn -q -B -s services/maven/settings.xml -f services/maven/pom.xml dependency:copy-dependencies \
    -Djars.dir=/jars

FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY controlplane controlplane
COPY groups groups
COPY tasks tasks
COPY guard guard
COPY templates templates
COPY manage.py .
# The guard (./guard, not on PyPI) holds the Redis key layout the control plane writes.
RUN pip install --no-cache-dir ./guard .
COPY --from=jars /jars/spark /opt/gapwatch/spark-jars
ENV SPARK_KAFKA_JARS_DIR=/opt/gapwatch/spark-jars PYTHONUNBUFFERED=1
RUN SECRET_KEY=build python manage.py collectstatic --noinput -v0
EXPOSE 8000
CMD ["gunicorn", "controlplane.wsgi", "--bind", "0.0.0.0:8000", "--workers", "2", "--threads", "4"]
