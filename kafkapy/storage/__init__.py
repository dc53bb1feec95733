"""kafkapy.storage"""
