'use strict'
// Shared plumbing for the kafkajs compat scripts that compat_tests/test_kafkajs.py runs.
//
// Why this shape: every script reads one JSON object (from stdin when it is large, else argv[2]),
// does one job against the broker named in it, and prints exactly one JSON line on stdout, so the
// pytest side asserts on data rather than on log text. kafkajs logs through a logCreator that
// writes to stderr (its default logger uses console.info, which would pollute stdout).
//
// Every script is bounded: a hard timer prints a JSON error to stderr and exits with code 3, so
// a client stuck in a retry loop against a broker bug fails the test with a reason instead of
// hanging until pytest's own timeout.

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const EXIT_ERROR = 1
const EXIT_TIMEOUT = 3

const stderrLogCreator = () => ({ namespace, level, label, log }) => {
  const { message, timestamp, logger, ...extra } = log
  process.stderr.write(
    `[kafkajs ${label}] ${namespace}: ${message} ${JSON.stringify(extra)}\n`
  )
}

function readArgs () {
  if (process.argv.length > 2 && process.argv[2] !== '-') {
    return JSON.parse(process.argv[2])
  }
  return JSON.parse(fs.readFileSync(0, 'utf8'))
}

function makeKafka (args, clientId) {
  const level = logLevel[(args.logLevel || 'WARN').toUpperCase()]
  return new Kafka({
    clientId: clientId || 'kafkapy-compat',
    brokers: args.bootstrap.split(','), // one broker or a cluster's comma-separated list
    logLevel: level === undefined ? logLevel.WARN : level,
    logCreator: stderrLogCreator,
    connectionTimeout: 5000,
    requestTimeout: 15000,
    // Few, quick retries: a broker bug must surface as an error, not minutes of backoff.
    retry: { initialRetryTime: 100, maxRetryTime: 1000, retries: 5 }
  })
}

function describeError (err) {
  if (!(err instanceof Error)) return { message: String(err) }
  const out = { name: err.name, message: err.message }
  if (err.type) out.type = err.type
  if (err.code !== undefined) out.code = err.code
  if (err.retriable !== undefined) out.retriable = err.retriable
  if (err.cause) out.cause = describeError(err.cause)
  if (Array.isArray(err.errors)) out.errors = err.errors.map(describeError)
  return out
}

// Runs `fn(args)` and prints its JSON result. Exit codes: 0 ok, 1 error, 3 timeout.
function main (fn) {
  let args
  try {
    args = readArgs()
  } catch (err) {
    process.stderr.write(JSON.stringify({ error: describeError(err) }) + '\n')
    process.exit(EXIT_ERROR)
  }
  const timeoutMs = args.timeoutMs || 30000
  const timer = setTimeout(() => {
    process.stderr.write(JSON.stringify({ error: { name: 'ScriptTimeout', timeoutMs } }) + '\n')
    process.exit(EXIT_TIMEOUT)
  }, timeoutMs)
  Promise.resolve()
    .then(() => fn(args))
    .then(result => {
      clearTimeout(timer)
      // Exit only once the line is flushed: a pipe write can be asynchronous and
      // process.exit() would cut a large result short.
      process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(0))
    })
    .catch(err => {
      clearTimeout(timer)
      process.stderr.write(JSON.stringify({ error: describeError(err) }) + '\n')
      process.exit(EXIT_ERROR)
    })
}

// Messages as the pytest side writes them: strings, headers {name: string}, optional timestamp.
function toKafkaMessages (messages) {
  return messages.map(m => {
    const out = { key: m.key === undefined ? null : m.key, value: m.value }
    if (m.headers) out.headers = m.headers
    if (m.timestamp !== undefined) out.timestamp = String(m.timestamp)
    if (m.partition !== undefined) out.partition = m.partition
    return out
  })
}

// A received message in the JSON shape the pytest side asserts on (Buffers -> utf-8 strings).
function fromKafkaMessage (partition, message) {
  const headers = {}
  for (const [name, value] of Object.entries(message.headers || {})) {
    const values = Array.isArray(value) ? value : [value]
    headers[name] = values.map(v => (v === null || v === undefined ? null : v.toString('utf8')))
  }
  return {
    partition,
    offset: Number(message.offset),
    timestamp: Number(message.timestamp),
    key: message.key === null ? null : message.key.toString('utf8'),
    value: message.value === null ? null : message.value.toString('utf8'),
    headers
  }
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

module.exports = { main, makeKafka, toKafkaMessages, fromKafkaMessage, describeError, sleep }
