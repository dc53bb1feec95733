'use strict'
// Several kafkajs consumers in one group (one process, separate clients and connections):
//   1. all members join; wait until the latest assignments cover every partition,
//   2. produce `messages` (phase 1) - each member must get exactly its partitions' share,
//   3. the first member leaves; the others rebalance onto its partitions,
//   4. produce `messages` again (phase 2) - the remaining members get all of them.
// Prints {"members": [{assignments, messages: [{phase, partition, offset, ...}]}]}; the pytest
// side checks disjointness, completeness and no duplicates.
//
// Args: bootstrap, topic, groupId, partitions, members (default 2), messages.
// Why: JoinGroup/SyncGroup with several members, the leader's client-side assignment, and a
// LeaveGroup-triggered rebalance are the group paths a single consumer never touches.

const { main, makeKafka, fromKafkaMessage, toKafkaMessages, sleep } = require('./lib')

const POLL_MS = 50
const WAIT_MS = 20000

async function waitFor (predicate, what, members) {
  const deadline = Date.now() + WAIT_MS
  for (;;) {
    const crashed = members.find(m => m.crashed)
    if (crashed) throw crashed.crashed
    if (predicate()) return
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(POLL_MS)
  }
}

main(async args => {
  const kafka = makeKafka(args, 'kafkapy-compat-group')
  const count = args.members || 2
  const members = []
  let phase = 1
  for (let i = 0; i < count; i++) {
    const consumer = makeKafka(args, `kafkapy-compat-member-${i}`).consumer({
      groupId: args.groupId,
      maxWaitTimeInMs: 100,
      sessionTimeout: 10000,
      rebalanceTimeout: 10000,
      heartbeatInterval: 300,
      allowAutoTopicCreation: false
    })
    const member = { consumer, messages: [], assignments: [], crashed: null, left: false }
    consumer.on(consumer.events.GROUP_JOIN, e => {
      member.assignments.push(e.payload.memberAssignment[args.topic] || [])
    })
    consumer.on(consumer.events.CRASH, e => { member.crashed = e.payload.error })
    members.push(member)
  }
  const active = () => members.filter(m => !m.left)
  const received = () => members.reduce((n, m) => n + m.messages.length, 0)
  // Settled: every active member holds an assignment and together they cover each partition once.
  const settled = () => {
    const latest = active().map(m => m.assignments[m.assignments.length - 1])
    if (latest.some(a => a === undefined)) return false
    const all = latest.flat().sort((a, b) => a - b)
    return all.length === args.partitions && all.every((p, i) => p === i)
  }
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  try {
    for (const member of members) {
      await member.consumer.connect()
      await member.consumer.subscribe({ topics: [args.topic], fromBeginning: true })
      await member.consumer.run({
        eachMessage: async ({ partition, message }) => {
          member.messages.push({ phase, ...fromKafkaMessage(partition, message) })
        }
      })
    }
    await waitFor(settled, 'every member to hold a share of the partitions', members)
    await producer.send({ topic: args.topic, acks: -1, messages: toKafkaMessages(args.messages) })
    await waitFor(() => received() >= args.messages.length, 'phase 1 messages', members)
    await sleep(300)
    const joinsBefore = members.map(m => m.assignments.length)
    members[0].left = true
    await members[0].consumer.disconnect()
    await waitFor(
      () => active().every(m => m.assignments.length > joinsBefore[members.indexOf(m)]) && settled(),
      'the rebalance after a member left',
      members
    )
    phase = 2
    await producer.send({ topic: args.topic, acks: -1, messages: toKafkaMessages(args.messages) })
    await waitFor(() => received() >= 2 * args.messages.length, 'phase 2 messages', members)
    await sleep(300)
  } finally {
    await producer.disconnect()
    for (const member of members) await member.consumer.disconnect()
  }
  return {
    members: members.map(m => ({ messages: m.messages, assignments: m.assignments }))
  }
})
