#!/usr/bin/env bash
# docs.records_drift: docs/records.md must be what records_doc prints from the
# schema tables today. Usage: check-records-doc.sh RECORDS_DOC PAGE
set -uo pipefail
tool=$1 page=$2
generated=$("$tool") || { echo "records_doc failed" >&2; exit 1; }
if ! diff -u --label "$page (checked in)" --label "records_doc (the schema today)" \
    "$page" <(printf '%s\n' "$generated"); then
  echo "docs/records.md is out of date with the record schema; regenerate it: cmake --build build --target records_doc && build/records/tools/records_doc > docs/records.md" >&2
  exit 1
fi
