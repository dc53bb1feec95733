'use strict'
// kafkajs group consumer: subscribes to one topic, optionally seeks, collects messages until
// `expected` arrived, keeps fetching `settleMs` longer (so extra or duplicate deliveries are
// caught, not hidden by stopping early), then leaves the group and prints
// {"messages": [{partition, offset, timestamp, key, value, headers}], "assignments": [...]}.
//
// Args: bootstrap, topic (or topics: [...]), groupId, expected, fromBeginning (default true), readUncommitted
// (default false = read_committed, kafkajs' own default), seek [{partition, offset}],
// settleMs (default 300), autoCommit (default true), maxBytesPerPartition, maxBytes, rackId
// (KIP-392: sent as Fetch v11 rack_id; kafkajs then fetches from the preferred read replica
// the leader names).
//
// Why seek is called before awaiting run(): kafkajs builds its consumer group synchronously in
// run() and applies pending seeks before the first fetch, so the seek is deterministic - no
// message from the old position can slip in first.

const { main, makeKafka, fromKafkaMessage, sleep } = require('./lib')

main(async args => {
  const kafka = makeKafka(args, 'kafkapy-compat-consumer')
  const consumer = kafka.consumer({
    groupId: args.groupId,
    readUncommitted: Boolean(args.readUncommitted),
    maxWaitTimeInMs: 100,
    maxBytesPerPartition: args.maxBytesPerPartition || 1048576,
    maxBytes: args.maxBytes || 10485760,
    rackId: args.rackId || '',
    sessionTimeout: 10000,
    heartbeatInterval: 1000,
    allowAutoTopicCreation: false
  })
  const messages = []
  const assignments = []
  let crashed = null
  let reached
  const reachedExpected = new Promise(resolve => { reached = resolve })
  consumer.on(consumer.events.GROUP_JOIN, e => {
    assignments.push(e.payload.memberAssignment)
  })
  consumer.on(consumer.events.CRASH, e => {
    crashed = e.payload.error
    reached()
  })
  await consumer.connect()
  try {
    await consumer.subscribe({
      topics: args.topics || [args.topic],
      fromBeginning: args.fromBeginning === undefined ? true : args.fromBeginning
    })
    const running = consumer.run({
      autoCommit: args.autoCommit === undefined ? true : args.autoCommit,
      eachMessage: async ({ topic, partition, message }) => {
        messages.push({ topic, ...fromKafkaMessage(partition, message) })
        if (messages.length >= args.expected) reached()
      }
    })
    for (const s of args.seek || []) {
      consumer.seek({ topic: args.topic, partition: s.partition, offset: String(s.offset) })
    }
    await running
    if (args.expected === 0) reached()
    await reachedExpected
    if (crashed) throw crashed
    await sleep(args.settleMs === undefined ? 300 : args.settleMs)
  } finally {
    await consumer.disconnect()
  }
  if (crashed) throw crashed
  return { messages, assignments }
})
