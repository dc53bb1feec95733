'use strict'
// kafkajs admin client: runs a list of actions in order on one connection and prints
// {"results": [...]} - one entry per action, in the shapes kafkajs returns them (Buffers and
// Longs already turned into JSON by kafkajs itself, offsets stay decimal strings).
//
// Why one script with a list of actions: creating a topic and then reading it back through the
// same client is what users do, and one Node start per test keeps the module well under a minute.
//
// An action that is expected to fail carries "expectError": true; its result is then the error
// (name, type, message) instead of an exception that ends the script.

const {
  ConfigResourceTypes,
  AclResourceTypes,
  AclOperationTypes,
  AclPermissionTypes,
  ResourcePatternTypes
} = require('kafkajs')
const { main, makeKafka, describeError } = require('./lib')

const RESOURCE_TYPES = { topic: ConfigResourceTypes.TOPIC, broker: ConfigResourceTypes.BROKER }

const ACTIONS = {
  createTopics: (admin, a) =>
    admin.createTopics({
      validateOnly: Boolean(a.validateOnly),
      waitForLeaders: true,
      timeout: 10000,
      topics: a.topics.map(t => ({
        topic: t.topic,
        numPartitions: t.numPartitions,
        replicationFactor: 1,
        configEntries: Object.entries(t.configs || {}).map(([name, value]) => ({ name, value }))
      }))
    }),
  listTopics: admin => admin.listTopics(),
  fetchTopicMetadata: (admin, a) => admin.fetchTopicMetadata({ topics: a.topics }),
  fetchTopicOffsets: (admin, a) => admin.fetchTopicOffsets(a.topic),
  fetchTopicOffsetsByTimestamp: (admin, a) =>
    admin.fetchTopicOffsetsByTimestamp(a.topic, a.timestamp),
  fetchOffsets: (admin, a) => admin.fetchOffsets({ groupId: a.groupId, topics: a.topics }),
  describeGroups: (admin, a) => admin.describeGroups(a.groupIds),
  describeConfigs: (admin, a) =>
    admin.describeConfigs({
      includeSynonyms: Boolean(a.includeSynonyms),
      resources: [
        {
          type: RESOURCE_TYPES[a.resourceType || 'topic'],
          name: a.name,
          configNames: a.configNames
        }
      ]
    }),
  alterConfigs: (admin, a) =>
    admin.alterConfigs({
      validateOnly: Boolean(a.validateOnly),
      resources: [
        {
          type: RESOURCE_TYPES[a.resourceType || 'topic'],
          name: a.name,
          configEntries: Object.entries(a.configs).map(([name, value]) => ({ name, value }))
        }
      ]
    }),
  deleteTopics: (admin, a) => admin.deleteTopics({ topics: a.topics, timeout: 10000 }),
  createPartitions: (admin, a) =>
    admin.createPartitions({
      validateOnly: Boolean(a.validateOnly),
      timeout: 10000,
      topicPartitions: [{ topic: a.topic, count: a.count }]
    }),
  deleteTopicRecords: (admin, a) =>
    admin.deleteTopicRecords({ topic: a.topic, partitions: a.partitions }),
  describeCluster: admin => admin.describeCluster(),
  describeAcls: (admin, a) =>
    admin.describeAcls({
      resourceType: AclResourceTypes.TOPIC,
      resourceName: a.topic,
      resourcePatternType: ResourcePatternTypes.LITERAL,
      principal: 'User:kafkajs',
      host: '*',
      operation: AclOperationTypes.ANY,
      permissionType: AclPermissionTypes.ANY
    }),
  createAcls: (admin, a) =>
    admin.createAcls({
      acl: [
        {
          resourceType: AclResourceTypes.TOPIC,
          resourceName: a.topic,
          resourcePatternType: ResourcePatternTypes.LITERAL,
          principal: 'User:kafkajs',
          host: '*',
          operation: AclOperationTypes.READ,
          permissionType: AclPermissionTypes.ALLOW
        }
      ]
    }),
  deleteAcls: (admin, a) =>
    admin.deleteAcls({
      filters: [
        {
          resourceType: AclResourceTypes.TOPIC,
          resourceName: a.topic,
          resourcePatternType: ResourcePatternTypes.LITERAL,
          principal: 'User:kafkajs',
          host: '*',
          operation: AclOperationTypes.ANY,
          permissionType: AclPermissionTypes.ANY
        }
      ]
    }),
  listGroups: admin => admin.listGroups(),
  deleteGroups: (admin, a) => admin.deleteGroups(a.groupIds),
  setOffsets: (admin, a) =>
    admin.setOffsets({ groupId: a.groupId, topic: a.topic, partitions: a.partitions }),
  resetOffsets: (admin, a) =>
    admin.resetOffsets({ groupId: a.groupId, topic: a.topic, earliest: Boolean(a.earliest) })
}

main(async args => {
  const admin = makeKafka(args, 'kafkapy-compat-admin').admin()
  await admin.connect()
  const results = []
  try {
    for (const action of args.actions) {
      const fn = ACTIONS[action.op]
      if (!fn) throw new Error(`unknown admin action ${action.op}`)
      if (action.expectError) {
        try {
          results.push({ unexpectedSuccess: await fn(admin, action) })
        } catch (err) {
          results.push({ error: describeError(err) })
        }
      } else {
        const value = await fn(admin, action)
        results.push(value === undefined ? null : value)
      }
    }
  } finally {
    await admin.disconnect()
  }
  return { results }
})
