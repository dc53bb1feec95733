"""kafkapy.cli"""
