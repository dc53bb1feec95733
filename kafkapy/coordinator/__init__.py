"""kafkapy.coordinator"""
