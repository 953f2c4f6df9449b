package gapwatch;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsOptions;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsResult;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.admin.MemberAssignment;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupIdNotFoundException;

/**
 * Classic and consumer (KIP-848) groups described, then their committed offsets read, as one JSON
 * text: the poll's steps 3 and 4 (tasks/kafka/snapshot.py) at 3,000 groups.
 *
 * <p>Through librdkafka each group's offsets are one call (confluent-kafka-python #1947) and every
 * member and offset one Python object; here the Admin batches both per coordinator inside the JVM,
 * and Python parses one text. Every group is described before any offset is asked, as the poll's
 * bounds need. A group the cluster no longer knows (deleted since it was listed) or that is Dead is
 * left out; a group whose answer is any other error is named in "others", for the caller to read
 * through librdkafka, which says the error in words (a refused ACL, a group of another protocol).
 */
public final class GroupReads {
    private GroupReads() {}

    /**
     * Reads the groups in {@code groupIds} ("length:id" after one another, the length in code
     * points: a group id may hold any character). {@code partitions} ("topic partition" lines)
     * limits the offsets read to those partitions; empty reads all of each group's.
     */
    public static String of(Admin admin, String groupIds, String partitions, int timeoutMs) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs + 5000L);
        List<String> ids = parseIds(groupIds);
        List<TopicPartition> wanted = new ArrayList<>();
        for (String line : partitions.split("\n")) {
            if (!line.isEmpty()) {
                int space = line.lastIndexOf(' ');
                wanted.add(new TopicPartition(line.substring(0, space), Integer.parseInt(line.substring(space + 1))));
            }
        }
        List<String> others = new ArrayList<>();
        Map<String, ConsumerGroupDescription> described = new HashMap<>();
        if (!ids.isEmpty()) {
            Map<String, KafkaFuture<ConsumerGroupDescription>> futures = admin.describeConsumerGroups(
                    ids, new DescribeConsumerGroupsOptions().timeoutMs(timeoutMs)).describedGroups();
            for (String id : ids) {
                try {
                    ConsumerGroupDescription description = futures.get(id).get(left(deadline), TimeUnit.NANOSECONDS);
                    if (description.groupState() != GroupState.DEAD) {
                        described.put(id, description);
                    }
                } catch (ExecutionException error) {
                    if (!(error.getCause() instanceof GroupIdNotFoundException)) {
                        others.add(id);
                    }
                }
            }
        }
        // Asked only once every group is described.
        Map<String, ListConsumerGroupOffsetsSpec> specs = new HashMap<>();
        for (String id : described.keySet()) {
            specs.put(id, wanted.isEmpty() ? new ListConsumerGroupOffsetsSpec()
                                           : new ListConsumerGroupOffsetsSpec().topicPartitions(wanted));
        }
        ListConsumerGroupOffsetsResult committed = specs.isEmpty() ? null
                : admin.listConsumerGroupOffsets(specs, new ListConsumerGroupOffsetsOptions().timeoutMs(timeoutMs));
        StringWriter text = new StringWriter();
        try (JsonGenerator json = new JsonFactory().createGenerator(text)) {
            json.writeStartObject();
            json.writeArrayFieldStart("groups");
            for (String id : ids) {
                ConsumerGroupDescription description = described.get(id);
                if (description == null) {
                    continue;
                }
                Map<TopicPartition, OffsetAndMetadata> offsets;
                try {
                    offsets = committed.partitionsToOffsetAndMetadata(id).get(left(deadline), TimeUnit.NANOSECONDS);
                } catch (ExecutionException error) {
                    if (!(error.getCause() instanceof GroupIdNotFoundException)) {
                        others.add(id);
                    }
                    continue;
                }
                json.writeStartObject();
                json.writeStringField("id", id);
                json.writeStringField("state", description.groupState().toString());
                json.writeStringField("type", description.type().name().toLowerCase());
                json.writeStringField("assignor", description.partitionAssignor() == null ? ""
                                                  : description.partitionAssignor());
                json.writeArrayFieldStart("members");
                for (MemberDescription member : description.members()) {
                    json.writeStartArray();
                    json.writeString(member.consumerId());
                    json.writeString(member.clientId() == null ? "" : member.clientId());
                    json.writeString(member.host() == null ? "" : member.host());
                    writePartitions(json, member.assignment());
                    writePartitions(json, member.targetAssignment().orElse(null));
                    json.writeEndArray();
                }
                json.writeEndArray();
                json.writeArrayFieldStart("committed");
                List<Map.Entry<TopicPartition, OffsetAndMetadata>> entries = new ArrayList<>(offsets.entrySet());
                entries.sort(Comparator.comparing((Map.Entry<TopicPartition, OffsetAndMetadata> entry) ->
                        entry.getKey().topic()).thenComparingInt(entry -> entry.getKey().partition()));
                for (Map.Entry<TopicPartition, OffsetAndMetadata> entry : entries) {
                    if (entry.getValue() != null && entry.getValue().offset() >= 0) {
                        json.writeStartArray();
                        json.writeString(entry.getKey().topic());
                        json.writeNumber(entry.getKey().partition());
                        json.writeNumber(entry.getValue().offset());
                        json.writeEndArray();
                    }
                }
                json.writeEndArray();
                json.writeEndObject();
            }
            json.writeEndArray();
            json.writeArrayFieldStart("others");
            for (String id : others) {
                json.writeString(id);
            }
            json.writeEndArray();
            json.writeEndObject();
        }
        return text.toString();
    }

    private static void writePartitions(JsonGenerator json, MemberAssignment assignment) throws Exception {
        json.writeStartArray();
        if (assignment != null) {
            for (TopicPartition partition : assignment.topicPartitions()) {
                json.writeStartArray();
                json.writeString(partition.topic());
                json.writeNumber(partition.partition());
                json.writeEndArray();
            }
        }
        json.writeEndArray();
    }

    static List<String> parseIds(String text) {
        List<String> ids = new ArrayList<>();
        int at = 0;
        while (at < text.length()) {
            int colon = text.indexOf(':', at);
            int codePoints = Integer.parseInt(text.substring(at, colon));
            int end = text.offsetByCodePoints(colon + 1, codePoints);
            ids.add(text.substring(colon + 1, end));
            at = end;
        }
        return ids;
    }

    private static long left(long deadline) {
        return Math.max(1L, deadline - System.nanoTime());
    }
}
