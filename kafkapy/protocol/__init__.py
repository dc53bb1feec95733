"""kafkapy.protocol"""
