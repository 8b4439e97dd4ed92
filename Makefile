# Developer shortcuts; CI runs .ci/run.
CARGO ?= cargo
PG_URL ?= postgres://postgres@127.0.0.1:5432/postgres
REDIS_URL ?= redis://127.0.0.1:6379
AMQP_URL ?= amqp://guest:guest@127.0.0.1:5672/%2f
# An S3-compatible test server for the media store, e.g. `moto_server -p 5055` (pip install "moto[server]").
S3_URL ?= http://127.0.0.1:5055

.PHONY: run run-sim test test-real lint fmt bench screenshots compose-config k8s-validate ci

## run: every role in one process on the embedded backends (./data/cova.db)
run:
	$(CARGO) run -p cova -- serve

## run-sim: cova-sim on 127.0.0.1:9090 and every role pointed at it (deploy/simulator.toml),
## in one step; Ctrl-C stops both
run-sim:
	$(CARGO) build -p cova -p cova-sim
	bash -c 'bin=$${CARGO_TARGET_DIR:-target}/debug; \
		$$bin/cova-sim --addr 127.0.0.1:9090 --payments-webhook http://127.0.0.1:8080/api/v1/billing/webhook & sim=$$!; \
		trap "kill $$sim 2>/dev/null" EXIT; $$bin/cova --config deploy/simulator.toml serve'

## test: the whole suite on the embedded backends
test:
	$(CARGO) test --workspace

## test-real: the same suite on PostgreSQL, Redis and RabbitMQ, plus the tests that need them
test-real:
	COVA_TEST_DATABASE_URL=$(PG_URL) COVA_TEST_CACHE_URL=$(REDIS_URL) COVA_TEST_QUEUE_URL=$(AMQP_URL) COVA_TEST_S3_ENDPOINT=$(S3_URL) \
		$(CARGO) test --workspace -- --include-ignored

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

## bench: release-mode benchmarks, printed and written to bench/results.md; the load comes
## from wrk in its own process (Debian's wrk package)
## (COVA_BENCH_ONLY=gateway|collect|media|export|scheduler|purge|fleet|ai|delivery|workspace|spikes|analyzer|search|instagram|pace re-runs one section and replaces its rows;
## workspace drives Debian's chromium and chromium-driver)
bench:
	$(CARGO) bench -p cova --bench suite

## screenshots: the workspace's main pages as PNGs in docs/screenshots/, taken by the
## headless-Chromium test (needs Debian's chromium and chromium-driver)
screenshots:
	COVA_SCREENSHOTS=$(CURDIR)/docs/screenshots $(CARGO) test -p cova-tests --test scenarios -- browser:: --include-ignored

compose-config:
	docker compose -f docker-compose.yml config -q

## k8s-validate: the Kustomize base deploy/k8s against the Kubernetes API schemas
k8s-validate:
	bash .ci/k8s-validate

ci:
	bash .ci/run
